"""searchd --watch keeps serving its generation when a corpus record under the root is empty or not
JSON (a copy in progress, a full disk): such a root holds no complete generation, it is not a reason to
exit. A real server over a copy of the textbooks corpus (store and BM25)."""

from __future__ import annotations

import shutil
import signal
import time

from searchd.client import SearchClient
from searchd.launch import start_background_server


def test_watch_survives_an_empty_or_broken_record(search_root, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(search_root / "textbooks", root / "textbooks")
    process, address = start_background_server(root, "--watch", "0.5")
    try:
        with SearchClient(address, retries=0) as client:
            before = [hit.id for hit in client.search("heart failure", k=5, timeout=30).hits]
            (root / "arriving").mkdir()
            (root / "arriving" / "build.json").write_text("")  # empty
            time.sleep(2)
            (root / "arriving" / "build.json").write_text('{"schema": ')  # cut short
            time.sleep(2)
            assert process.poll() is None, process.log_path.read_text()[-2000:]
            assert [hit.id for hit in client.search("heart failure", k=5, timeout=30).hits] == before
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
