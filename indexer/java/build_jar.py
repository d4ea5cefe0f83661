"""`make java`: compile indexer/java/medsnip/anserini/*.java against pyserini's Anserini jar into the
checked-in indexer/java/medsnip-anserini.jar.

Users never compile: the jar ships with the package. Building needs a JDK 21+ javac (Anserini's classes
are Java 21); pass its folder as JAVA_HOME. The jar records the sha256 of its sources, which a test
compares with the sources in the tree, so a source edited without `make java` fails the suite. Entries
carry a fixed timestamp, so the same classes always give the same jar bytes.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
JAR = HERE / "medsnip-anserini.jar"
SOURCES_HASH_ENTRY = "medsnip/anserini/sources.sha256"
_FIXED_TIME = (2026, 1, 1, 0, 0, 0)


def java_sources() -> list[Path]:
    return sorted((HERE / "medsnip").rglob("*.java"))


def sources_sha256() -> str:
    """sha256 over the sources' relative paths and bytes, the value the jar records."""
    digest = hashlib.sha256()
    for path in java_sources():
        digest.update(path.relative_to(HERE).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def main() -> None:
    sys.path.insert(0, str(HERE.parents[1]))
    from indexer.jvm import anserini_jar

    javac = Path(os.environ.get("JAVA_HOME", "")) / "bin" / "javac"
    if not javac.is_file():
        javac = Path(shutil.which("javac") or "javac")
    with tempfile.TemporaryDirectory() as classes:
        subprocess.run(
            [str(javac), "--release", "21", "-cp", str(anserini_jar()), "-d", classes, *map(str, java_sources())],
            check=True,
        )
        with zipfile.ZipFile(JAR.with_suffix(".tmp"), "w", zipfile.ZIP_DEFLATED) as jar:
            for path in sorted(Path(classes).rglob("*.class")):
                info = zipfile.ZipInfo(path.relative_to(classes).as_posix(), _FIXED_TIME)
                jar.writestr(info, path.read_bytes(), zipfile.ZIP_DEFLATED)
            jar.writestr(zipfile.ZipInfo(SOURCES_HASH_ENTRY, _FIXED_TIME), sources_sha256() + "\n")
    JAR.with_suffix(".tmp").replace(JAR)
    print(f"wrote {JAR.relative_to(HERE.parents[1])}")


if __name__ == "__main__":
    main()
