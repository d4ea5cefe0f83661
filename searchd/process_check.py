"""Is a process id a searchd, and does it serve the root we mean? Checked before `searchd reload` or
`medsnip update --reload-pid` sends SIGHUP: a pid file left by a killed searchd can name any process by
now, and SIGHUP ends most programs."""

from __future__ import annotations

from pathlib import Path


def searchd_problem(pid: int, root: Path | None = None) -> str | None:
    """Why `pid` is not a running `searchd serve` (of `root`, when given); None when it is. Reads
    /proc/PID/cmdline (Linux); elsewhere only that the process exists is checked."""
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    try:
        arguments = (proc / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return f"no process {pid} (a stale pid file?)"
    words = [a.decode(errors="replace") for a in arguments if a]
    is_searchd = any(Path(w).name == "searchd" or w == "searchd.cli" for w in words) and "serve" in words
    if not is_searchd:
        return f"process {pid} is not a searchd serve ({' '.join(words)[:200]!r}): a stale pid file?"
    if root is not None and "--root" in words[:-1]:
        served = Path(words[words.index("--root") + 1])
        if served.resolve() != Path(root).resolve():
            return f"process {pid} is a searchd serving {served}, not {root}"
    return None


def write_pid_file(path: Path, pid: int, root: Path) -> None:
    """The pid, then the root it serves (what `searchd reload --pid-file` checks); written whole (a temp
    file renamed over `path`), so a reader never sees half of it."""
    from medsnip.buildrecord import atomic_write_bytes

    atomic_write_bytes(Path(path), f"{pid}\n{Path(root).resolve()}\n".encode())


def read_pid_file(path: Path) -> tuple[int, Path | None]:
    """(pid, root) from a pid file; ValueError naming the file for anything else."""
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a searchd pid file (not UTF-8 text)") from None
    try:
        return int(lines[0].strip()), (Path(lines[1].strip()) if len(lines) > 1 and lines[1].strip() else None)
    except ValueError:
        raise ValueError(f"{path}: not a searchd pid file (first line {lines[0][:40]!r})") from None
