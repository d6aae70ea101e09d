"""The chain's runs side by side: `PYTHONPATH=. python <this folder>/compare.py` (the rows and event logs here)."""
import glob
import gzip
import json
import os
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))


def batches(name: str) -> list[dict]:
    out = []
    for path in glob.glob(os.path.join(HERE, f"{name}.*.events.jsonl.gz")):
        with gzip.open(path, "rt") as f:
            out += [e for e in map(json.loads, f) if e.get("kind") == "batch"]
    return sorted(out, key=lambda e: e["t"])


def main() -> None:
    print("| run | strategy | seed | trials | batches | first batch after server (s) | its search (s) | median search "
          "per batch (s) | tuned (ms) | PyTorch fp32 (ms) | PyTorch / tuned |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for path in sorted(glob.glob(os.path.join(HERE, "*.json"))):
        name = os.path.basename(path).removesuffix(".json")
        rows = json.load(open(path)).get("models", [])
        for row in rows:
            got = batches(name)
            search = [e["search_s"] for e in got if e.get("search_s") is not None]
            print(f"| {name} | {row['strategy']} | {row['seed']} | {row['trials']} | {len(got)} | "
                  f"{row.get('first_tuned_batch_after_server_s')} | {search[0] if search else None} | "
                  f"{statistics.median(search) if search else None} | {row['tuned_ms']:.3f} | "
                  f"{row['pytorch_ms']:.3f} | {row['ratio']} |")


if __name__ == "__main__":
    main()
