"""The report a researcher reads: paper figures shipped with the package, no machine path in any report,
and ``report.html`` displayed by a real headless browser (Chromium).

The bench runs in a subprocess from a copy of the packages in a temporary folder, as an install would hold
them: no ``../shared`` next to it, HOME and the working directory elsewhere. Expected paper values come from
the shared reference file and the paper's LaTeX source, not from the package.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from pools.store import save_pool
from tests.conftest import REPO_ROOT
from tests.test_bench import small_pool

PACKAGES = ("agents", "coba_cli", "coba_env", "eval", "pools", "train")
RUN = """
import json, sys
from eval.bench import run_bench
results = run_bench(sys.argv[1], "greedy,coba_strong,difficulty_adaptive,bon16_majority,pool_oracle",
                    out_dir=sys.argv[2], progress=False, workers=1, resamples=200)
print(json.dumps(results["paper"]))
"""


@pytest.fixture(scope="module")
def installed_run(tmp_path_factory):
    """A bench on a paper-profile pool saved under a temporary path, run from a copied install."""
    root = tmp_path_factory.mktemp("install")
    site = root / "site"
    for pkg in PACKAGES:
        shutil.copytree(REPO_ROOT / pkg, site / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    pool_dir = save_pool(small_pool(profile="paper"), root / "my-pools" / "paper-like")
    out = root / "reports" / "bench"
    home = root / "home"
    home.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site), "HOME": str(home), "MPLCONFIGDIR": str(home / "mpl")}
    env.pop("COBA_PAPER_TARGETS", None)
    proc = subprocess.run([sys.executable, "-c", RUN, str(pool_dir), str(out)], cwd=home, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not (site.parent / "shared").exists()  # no ../shared next to the install
    return root, out, json.loads(proc.stdout.strip().splitlines()[-1]), proc.stdout


def _report_texts(out: Path) -> dict[str, str]:
    files = [out / "report.md", out / "report.html", out / "results.json", *sorted((out / "tables").iterdir())]
    return {str(p.relative_to(out)): p.read_text(encoding="utf-8") for p in files}


def test_paper_comparison_works_from_an_install_without_shared(installed_run, shared_dir):
    root, out, paper, printed = installed_run
    assert paper["status"] == "compared"
    reference = json.loads((shared_dir / "reference" / "paper-targets.json").read_text())
    rows = reference["main_table"]["rows"]
    acc = reference["main_table"]["columns"].index("acc")
    assert paper["main_table"]["greedy"]["acc"]["paper"] == rows["greedy"][acc]
    assert paper["main_table"]["difficulty_adaptive"]["acc"]["paper"] == rows["difficulty_adaptive"][acc]
    report = (out / "report.md").read_text()
    assert "## Comparison with the paper" in report and "packaged copy of the paper's tables" in report
    assert f"{rows['difficulty_adaptive'][acc]:.2f}" in report
    assert "label tab:main" in report  # the source table is named
    assert (out / "tables" / "paper_main.md").is_file()
    greedy = [line for line in printed.splitlines() if line.startswith("greedy ")]
    assert "paper acc" in printed and greedy and f" {rows['greedy'][acc]:.2f}" in greedy[0]


def test_no_report_holds_a_machine_path(installed_run):
    root, out, _, _ = installed_run
    machine = {str(root), str(root.resolve()), str(REPO_ROOT), os.path.expanduser("~"), str(root / "home")}
    for name, text in _report_texts(out).items():
        for path in machine:
            assert path not in text, f"{name} holds the machine path {path}"
    results = json.loads((out / "results.json").read_text())
    assert results["meta"]["pool"]["spec"] == "paper-like"  # the pool folder's name only


def test_packaged_paper_figures_match_the_reference_and_name_their_sources(shared_dir):
    packaged = json.loads((REPO_ROOT / "eval" / "data" / "paper_targets.json").read_text())
    reference = json.loads((shared_dir / "reference" / "paper-targets.json").read_text())
    for block in ("setup", "routing_spec", "main_table", "per_dataset_accuracy", "paired_bootstrap_per_example",
                  "claims"):
        assert packaged[block] == reference[block], block
        assert packaged["sources"][block], f"no source named for {block}"


def test_packaged_main_table_matches_the_papers_latex(shared_dir):
    """The main-table rows, in order, as printed in the paper's LaTeX table tab:main."""
    tex = (shared_dir / "paper" / "coba-paper.tex").read_text()
    table = tex[:tex.index(r"\label{tab:main}")]
    table = table[table.rindex(r"\begin{table*}"):]
    body = [line for line in table.splitlines() if line.count("&") == 5 and r"\textbf{Method}" not in line]
    packaged = json.loads((REPO_ROOT / "eval" / "data" / "paper_targets.json").read_text())["main_table"]
    assert len(body) == len(packaged["rows"])
    for line, (name, values) in zip(body, packaged["rows"].items(), strict=True):
        cells = [re.sub(r"\\textbf\{([^}]*)\}", r"\1", c).strip(" \\") for c in line.split("&")[1:]]
        acc, tok, calls, ptok, latency = cells
        assert float(acc) == values[0], name
        assert float(tok.rstrip("k")) == pytest.approx(values[1] / 1000, abs=0.05), name
        assert float(calls) == values[2] and float(latency) == values[4], name
        assert float(ptok.rstrip("k")) == pytest.approx(values[3] / 1000, abs=0.05), name


# ---------------------------------------------------------------- the page in a real browser

def _browser() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("no Chromium on PATH: the report.html test opens the page in a real headless browser; install "
                "it with `bash scripts/setup_browser.sh` (Debian's chromium package)")


# Runs after the page has loaded: records each image's decoded size, then sorts the main table by accuracy
# (two clicks: descending).
PROBE = """<script>
window.addEventListener('load', function () {
  document.querySelectorAll('img').forEach(function (img) {
    img.setAttribute('data-natural-width', img.naturalWidth);
    img.setAttribute('data-natural-height', img.naturalHeight);
    img.setAttribute('data-complete', img.complete ? '1' : '0');
  });
  var th = document.querySelectorAll('#table-main thead th')[1];
  th.click();
  th.click();  // the table starts in ascending order: the second click must reverse it
  var values = Array.prototype.map.call(document.querySelectorAll('#table-main tbody')[0].rows,
                                        function (r) { return r.cells[1].dataset.value; });
  document.body.setAttribute('data-sorted-acc', values.join(','));
});
</script>"""


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", head[16:24])


def test_report_html_shows_every_figure_in_a_browser(installed_run, tmp_path):
    browser = _browser()
    _, out, _, _ = installed_run
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<img" in page and 'src="figures/' not in page  # embedded, not linked
    probe = tmp_path / "report.html"  # only the page: no figures folder next to it
    probe.write_text(page.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    proc = subprocess.run([browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000",
                           "--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=120)
    dom = proc.stdout
    assert "<img" in dom, f"the browser returned no DOM (exit {proc.returncode}): {proc.stderr[-2000:]}"
    figures = json.loads((out / "results.json").read_text())["files"]["figures"]
    assert set(figures) == {"frontier", "per_dataset_frontiers", "per_dataset_heatmap", "action_allocation",
                            "cost_savings"}
    shown = dict(re.findall(r'<figure id="figure-([a-z_]+)"><img ([^>]*)>', dom))
    assert set(shown) == set(figures)
    for stem, attrs in shown.items():
        width = int(re.search(r'data-natural-width="(\d+)"', attrs).group(1))
        height = int(re.search(r'data-natural-height="(\d+)"', attrs).group(1))
        assert (width, height) == _png_size(out / "figures" / f"{stem}.png"), stem
    sorted_acc = re.search(r'data-sorted-acc="([^"]*)"', dom).group(1).split(",")
    values = [float(v) for v in sorted_acc]
    assert values == sorted(values, reverse=True) and len(values) == 4  # the four deployable rows, descending
