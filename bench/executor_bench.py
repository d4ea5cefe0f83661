"""corpusbuild on Ray against the local process pool (run_benchmarks.py --only executor): the 60,000-citation
PubMed pair, 2 workers / a 2-CPU cluster, best of N interleaved rounds. Three ways to run it:
- `--executor local --workers 2`: the fork-based pool;
- `--executor ray --workers 2`: a private Ray cluster started (and stopped) by the command itself;
- `--executor ray --ray-address auto`: joining a cluster already running (`ray start --head --num-cpus 2`),
  as a user running many builds would.
Wall time is the whole command; "build s" is what build.json records (tasks and publish, after the
cluster is up). Shards must be byte-identical to the pool's. Returns markdown lines."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson

RAY = Path(sys.executable).with_name("ray")


def _command(files: list[Path], out: Path, *executor: str) -> list[str]:
    shutil.rmtree(out, ignore_errors=True)
    return [
        sys.executable,
        "-m",
        "corpusbuild",
        "pubmed",
        *map(str, files),
        "--out",
        str(out),
        "--shards",
        "8",
        "--workers",
        "2",
        "--quiet",
        *executor,
    ]


def _shards(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.glob("shard-*.jsonl"))}


def executor_section(files: list[Path], work: Path, repeats: int, measure) -> list[str]:
    articles = 30_000 * len(files)
    setups = {
        "local process pool, 2 workers": ("local", ["--executor", "local"]),
        "Ray, private 2-CPU cluster per command": ("ray-private", ["--executor", "ray"]),
        "Ray, joining a running 2-CPU cluster": ("ray-joined", ["--executor", "ray", "--ray-address", "auto"]),
    }
    runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name in setups}
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    subprocess.run(
        [str(RAY), "start", "--head", "--num-cpus", "2", "--include-dashboard", "false", "--disable-usage-stats"],
        check=True,
        capture_output=True,
        env=env,
    )
    try:
        for repeat in range(repeats):
            print(f"executor round {repeat + 1}/{repeats}", flush=True)
            for name, (folder, arguments) in setups.items():
                out = work / folder
                seconds, rss = measure(_command(files, out, *arguments))
                build = orjson.loads((out / "build.json").read_bytes())["run"]["seconds"]["total"]
                runs[name].append((seconds, build, rss))
    finally:
        subprocess.run([str(RAY), "stop", "--force"], capture_output=True, env=env)
    identical = all(_shards(work / folder) == _shards(work / "local") for folder, _ in setups.values())
    local_best = min(seconds for seconds, _, _ in runs["local process pool, 2 workers"])
    local_build = min(build for _, build, _ in runs["local process pool, 2 workers"])
    lines = [
        "## corpusbuild on Ray vs the local process pool (two files, 60,000 citations)",
        "",
        "| executor | wall s | build s (cluster up) | articles/s (wall) | vs pool (wall) | vs pool (build s) | "
        "peak RSS MiB (driver) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, measured in runs.items():
        seconds = min(s for s, _, _ in measured)
        build = min(b for _, b, _ in measured)
        rss = max(r for _, _, r in measured)
        lines.append(
            f"| {name} | {seconds:.2f} | {build:.2f} | {articles / seconds:,.0f} | "
            f"{local_best / seconds:.2f}x | {local_build / build:.2f}x | {rss:.0f} |"
        )
    lines += [
        "",
        f"Shards byte-identical to the pool's for every Ray run: {'yes' if identical else 'NO'}. "
        "Target from the issue: Ray >= 0.85x the pool's articles/s on a local 2-CPU cluster. A private "
        "cluster pays Ray's start-up (GCS, raylet, two workers importing medsnip) in every command; a joined "
        "cluster pays the driver's `import ray` and connection (wall s minus build s) and fresh worker "
        "processes per job (inside build s). These costs are fixed per command, not per article: 'vs pool (build s)' "
        "is the rate once connected, which longer builds approach. Peak RSS is the driver's: the Ray workers "
        "are not its children.",
        "",
    ]
    return lines
