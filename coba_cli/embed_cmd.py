"""``coba pools embed POOL FILE``: import the user's own embedding per item into a pool (``pools.embeddings``).

Everything is checked before anything is written (one line naming the file, row and field, exit 2); the table
lands in the pool as ``embeddings.parquet`` through a temp file and a rename, and the pool's marker lists it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from coba_cli.errors import UsageError
from coba_cli.help_text import ExampleFormatter, examples


def _cmd_embed(args: argparse.Namespace) -> int:
    from pools.atomic_write import OUTPUT_MARKER, mark_output
    from pools.embeddings import EMBEDDINGS_FILE, read_embedding_rows, validate_embeddings, write_embeddings
    from pools.output_paths import project_made
    from pools.store import load_pool

    pool_dir = Path(args.pool)
    pool = load_pool(pool_dir)  # a pool, valid, before the file is read
    target = pool_dir / EMBEDDINGS_FILE
    if target.exists() and not args.force:
        raise UsageError(f"{target}: exists; pass --force to replace the pool's embeddings")
    ours = project_made(pool_dir) == "pool" if (pool_dir / OUTPUT_MARKER).is_file() else False
    rows = read_embedding_rows(args.file)
    table = validate_embeddings(rows, pool.items, str(args.file), default=args.default)
    write_embeddings(table, pool_dir)
    if ours:  # the marker lists the pool's entries: the new table is the project's too
        mark_output(pool_dir, "pool")
    filled = len(table) - len(rows)
    print(f"embedded {args.file} -> {target}: {len(table)} items x {len(table['embedding'].iloc[0])} dimensions"
          + (f"; {filled} items without one filled with {args.default:g}" if filled else ""))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``coba pools embed``."""
    p = sub.add_parser("embed", help="add your own embedding per item to a pool (problem features' embeddings)",
                       formatter_class=ExampleFormatter,
                       description="Read FILE (.parquet: item_id, embedding, dataset optional; .npz: arrays item_id, "
                       "embedding [n, d], dataset optional; .jsonl: one {item_id, embedding, dataset?} per line), "
                       "check it against POOL's items (one dimension, finite values, known ids, each item once, every "
                       "item covered unless --default) and write it into POOL as embeddings.parquet. The problem "
                       "features' 'embeddings' source reads it (docs/ROUTING.md).",
                       epilog=examples("coba pools embed runs/pools/mine vectors.npz",
                                       "coba train knn_router --pool runs/pools/mine --problem-features embeddings "
                                       "--out runs/knn-emb"))
    p.add_argument("pool", help="pool directory")
    p.add_argument("file", help="embedding file (.parquet, .npz or .jsonl)")
    p.add_argument("--default", type=float, default=None, metavar="VALUE",
                   help="the value of every coordinate of an item the file leaves out (default: every item must "
                        "have one)")
    p.add_argument("--force", action="store_true", help="replace the pool's embeddings if it has some")
    p.set_defaults(func=_cmd_embed)
