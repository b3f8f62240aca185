"""Reading a stable-baselines3 model ``.zip`` without running any code stored in it.

SB3's own ``load`` unpickles (with cloudpickle) every ``":serialized:"`` entry of the zip's ``data`` file (the
policy class, its keyword arguments, the spaces, the learning-rate schedule), so a crafted zip runs whatever
it likes the moment it is opened. This reader never unpickles: it reads the ``data`` JSON itself and uses only
its plain-text parts (SB3 writes the readable attributes of each serialized object beside the pickle), builds
the env's own spaces, picks the network class from the weights' names (actor-critic ``action_net`` or DQN
``q_net``; MaskablePPO's network is the actor-critic one), maps ``activation_fn`` to a ``torch.nn`` activation
by name from a fixed list, and loads ``policy.pth`` with ``torch.load(weights_only=True)``. A zip whose policy
needs anything else (a custom policy class or feature extractor, keyword arguments that exist only as a
pickle) is refused with one line saying so. docs/OUTPUTS.md, "Model files never run code".
"""

from __future__ import annotations

import io
import json
import re
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pools.parse_boundary import PARSE_ERRORS, parse_problem

__all__ = ["SB3Model", "read_sb3_model"]

#: Largest ``data`` / ``policy.pth`` member read from a zip (a controller's are a few kB / MB).
MAX_MEMBER_BYTES = 256 * 2**20
#: Activations a policy may name, by their ``torch.nn`` class name.
ACTIVATIONS = ("Tanh", "ReLU", "LeakyReLU", "ELU", "SELU", "GELU", "SiLU", "Sigmoid", "Softplus", "Mish", "Identity")
#: Plain policy keyword arguments passed on as they are.
PLAIN_KWARGS = ("net_arch", "ortho_init", "log_std_init", "full_std", "use_expln", "squash_output",
                "share_features_extractor", "normalize_images", "n_critics", "dueling")
#: Modules a policy class may come from (read from the readable ``__module__`` field, never imported).
POLICY_MODULES = ("stable_baselines3.", "sb3_contrib.")

_CLASS_REPR = re.compile(r"<class '([\w.]+)'>")


@dataclass
class SB3Model:
    """What acting needs from an SB3 zip: the policy network and the observation space (as ``model.policy`` /
    ``model.observation_space`` of a loaded SB3 algorithm)."""

    policy: Any
    observation_space: Any
    action_space: Any
    num_timesteps: int | None = None  # the training steps the zip records (a plain field of its data)


def _refuse(model_file: Path, what: str) -> ValueError:
    return ValueError(f"{model_file}: {what}; coba-env never runs code stored in a model file (docs/OUTPUTS.md)")


def _member(archive: zipfile.ZipFile, name: str, model_file: Path) -> bytes:
    try:
        info = archive.getinfo(name)
    except KeyError:
        raise ValueError(f"{model_file}: not an SB3 model zip (no {name!r} inside)") from None
    if info.file_size > MAX_MEMBER_BYTES:
        raise ValueError(f"{model_file}: {name!r} is {info.file_size} bytes; expected at most {MAX_MEMBER_BYTES}")
    return archive.read(name)


def _space_shape(entry: Any) -> tuple[int, ...] | None:
    shape = entry.get("_shape", entry.get("shape")) if isinstance(entry, dict) else None
    if isinstance(shape, list) and all(isinstance(s, int) and not isinstance(s, bool) for s in shape):
        return tuple(shape)
    return None


def _discrete_n(entry: Any) -> int | None:
    n = entry.get("n") if isinstance(entry, dict) else None
    match = re.fullmatch(r"(?:np\.int64\()?(\d{1,6})\)?", str(n)) if n is not None else None
    return int(match.group(1)) if match else None


def _type_name(entry: Any) -> str:
    """The class name SB3 wrote for a serialized entry (``<class 'gymnasium.spaces.box.Box'>`` -> ``Box``)."""
    text = str(entry.get(":type:", "")) if isinstance(entry, dict) else type(entry).__name__
    match = _CLASS_REPR.fullmatch(text)
    return match.group(1).rsplit(".", 1)[-1] if match else text[:60]


def _check_spaces(data: dict[str, Any], model_file: Path, n_features: int, n_actions: int, note: str = "") -> None:
    """The readable shape / size of the zip's spaces must be the env's (a Box / Discrete or a subclass)."""
    obs, act = data.get("observation_space"), data.get("action_space")
    if not _type_name(obs).endswith("Box") or _space_shape(obs) != (n_features,):
        raise ValueError(f"{model_file}: the model's observation space {_type_name(obs)}(shape={_space_shape(obs)}) "
                         f"does not fit the env's Box({n_features},) observations{note}")
    if not _type_name(act).endswith("Discrete") or _discrete_n(act) != n_actions:
        raise ValueError(f"{model_file}: the model's action space {_type_name(act)}(n={_discrete_n(act)}) does not "
                         f"fit the env's Discrete({n_actions}) actions")


def _policy_kwargs(data: dict[str, Any], model_file: Path) -> dict[str, Any]:
    import torch

    raw = data.get("policy_kwargs") or {}
    if not isinstance(raw, dict):
        raise ValueError(f"{model_file}: policy_kwargs is {str(raw)[:60]!r}; expected an object")
    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        if key in (":type:", ":serialized:"):
            continue
        if key == "activation_fn":
            match = _CLASS_REPR.fullmatch(str(value))
            name = match.group(1).rsplit(".", 1)[-1] if match else None
            if not (match and match.group(1).startswith("torch.nn.") and name in ACTIVATIONS):
                raise _refuse(model_file, f"policy_kwargs.activation_fn is {str(value)[:80]!r}, not one of the "
                                          f"torch.nn activations {list(ACTIVATIONS)}")
            kwargs[key] = getattr(torch.nn, name)
        elif key in PLAIN_KWARGS and not (isinstance(value, str) and value.startswith("<")):
            kwargs[key] = value
        else:
            raise _refuse(model_file, f"policy_kwargs.{key} ({str(value)[:60]!r}) exists only as pickled Python")
    return kwargs


def _policy_class(data: dict[str, Any], state: dict[str, Any], model_file: Path) -> Any:
    entry = data.get("policy_class")
    module = str(entry.get("__module__", "")) if isinstance(entry, dict) else ""
    if module and not module.startswith(POLICY_MODULES):
        raise _refuse(model_file, f"the policy class comes from {module!r}, not from stable-baselines3")
    if any(k.startswith("q_net.") for k in state):
        from stable_baselines3.dqn.policies import DQNPolicy

        return DQNPolicy
    if "action_net.weight" in state:
        from stable_baselines3.common.policies import ActorCriticPolicy

        return ActorCriticPolicy
    raise ValueError(f"{model_file}: the policy weights are neither actor-critic (action_net) nor DQN (q_net); "
                     "only those are supported")


def _weights(archive: zipfile.ZipFile, model_file: Path) -> dict[str, Any]:
    import torch

    raw = _member(archive, "policy.pth", model_file)
    try:
        state = torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - torch raises many kinds (UnpicklingError, RuntimeError, EOFError)
        raise ValueError(f"{model_file}: policy.pth is not a readable weights file ({type(exc).__name__}); "
                         "it is damaged or holds more than tensors") from None
    if not isinstance(state, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                              for k, v in state.items()):
        raise ValueError(f"{model_file}: policy.pth is not a table of named weights")
    return state


def read_sb3_model(model_file: str | Path, *, n_features: int | Callable[[int, int | None], int],
                   n_actions: int | None = None, observation_note: str = "") -> SB3Model:
    """The policy network in SB3 zip ``model_file`` for ``Box(n_features,)`` / ``Discrete(n_actions)``, read
    without unpickling anything; ``ValueError`` naming the file for anything unreadable or refused.

    ``n_actions=None`` takes the zip's own (readable) ``Discrete(n)``; ``n_features`` may then be a function of
    that action count and the zip's own observation length (None when unreadable) giving the length it accepts
    (a replay layout's feature count follows its verifier count). ``observation_note`` is added to the message
    of an observation space that does not fit."""
    import numpy as np
    from gymnasium import spaces

    model_file = Path(model_file)
    try:
        with zipfile.ZipFile(model_file) as archive:
            data_bytes = _member(archive, "data", model_file)
            state = _weights(archive, model_file)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, NotImplementedError) as exc:
        raise ValueError(f"{model_file}: not a readable SB3 model zip ({exc})") from None
    try:
        data = json.loads(data_bytes)
    except PARSE_ERRORS as exc:
        raise ValueError(f"{model_file}: the zip's 'data' is not readable JSON ({parse_problem(exc)})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{model_file}: the zip's 'data' is not a JSON object")
    if n_actions is None:
        n_actions = _discrete_n(data.get("action_space"))
        if n_actions is None or n_actions < 2:
            raise ValueError(f"{model_file}: the model's action space {_type_name(data.get('action_space'))} "
                             "is not a readable Discrete(generators + verifiers + 1); train it on coba/Replay-v0 or "
                             "coba/Route-v0")
    if callable(n_features):
        shape = _space_shape(data.get("observation_space"))
        n_features = n_features(n_actions, shape[0] if shape is not None and len(shape) == 1 else None)
    _check_spaces(data, model_file, n_features, n_actions, observation_note.format(n_actions=n_actions))
    kwargs = _policy_kwargs(data, model_file)
    policy_class = _policy_class(data, state, model_file)
    obs_space = spaces.Box(-np.inf, np.inf, (n_features,), np.float32)
    act_space = spaces.Discrete(n_actions)
    try:
        net = policy_class(obs_space, act_space, lambda _: 0.0, **kwargs)
        net.load_state_dict(state)
    except Exception as exc:  # noqa: BLE001 - a mismatched architecture raises RuntimeError / TypeError / KeyError
        first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"{model_file}: the policy weights do not load ({first})") from None
    net.set_training_mode(False)
    steps = data.get("num_timesteps")
    return SB3Model(net, obs_space, act_space, steps if isinstance(steps, int) and not isinstance(steps, bool) else None)
