"""A reader that is a causal language model run in this process by transformers, from a local folder or a
GGUF file (`model.gguf`: its config and tokenizer come from the file; transformers dequantizes it).
Greedy decoding, through the tokenizer's chat template where it has one: the same prompt gives the same
answer on the same machine."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from medsnip.buildrecord import sha256_file
from medsnip.encoders import weights_sha256
from medsnip.encoders.transformer import quiet_model_loading
from refkit.readers.errors import ReaderError


@contextlib.contextmanager
def each_gguf_parsed_once() -> Iterator[None]:
    """transformers parses a GGUF file three times (for the config, the tokenizer and the weights), each
    parse walking every metadata field (SmolLM2-135M's 49,152-token vocabulary: about 2 s of CPU each), and
    rebuilds gguf's tensor-name map for every module of the model (400 times for SmolLM2). Within this block
    gguf's reader is one parsed file per path and its name map one per architecture and depth: the same
    read-only fields, tensors and names, computed once (SmolLM2's load: 15.8 s to 7.6 s of CPU)."""
    try:
        import gguf
    except ImportError:  # no GGUF support installed: a folder loads without it, a GGUF fails as before
        yield
        return
    reader_class, name_map, parsed, maps = gguf.GGUFReader, gguf.get_tensor_name_map, {}, {}

    def parse_once(path, mode="r"):
        key = (os.path.realpath(path), mode)
        if key not in parsed:
            parsed[key] = reader_class(path, mode)
        return parsed[key]

    def name_map_once(arch, n_blocks):
        if (arch, n_blocks) not in maps:
            maps[arch, n_blocks] = name_map(arch, n_blocks)
        return maps[arch, n_blocks]

    gguf.GGUFReader, gguf.get_tensor_name_map = parse_once, name_map_once
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader_class, name_map


class CausalLM:
    kind = "causal-lm"

    def __init__(self, model: str, device: str = "cpu"):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = Path(model)
        if not path.exists():
            raise ReaderError(f"reader model {model}: no such folder or .gguf file (nothing is downloaded)")
        folder, extra = (path.parent, {"gguf_file": path.name}) if path.is_file() else (path, {})
        quiet_model_loading()
        try:
            with each_gguf_parsed_once(), quiet_gguf_conversion():
                self.tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True, **extra)
                self.model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, **extra).to(device)
        except (OSError, ValueError) as error:
            raise ReaderError(f"reader model {model}: transformers cannot load it: {error}") from None
        self.model.eval()
        self.name, self.device = path.name, device
        self.sha256 = weights_sha256(path) if path.is_dir() else sha256_file(path)[0]

    @property
    def identity(self) -> dict:
        return {"kind": self.kind, "model": self.name, "sha256": self.sha256}

    def complete(self, prompt: str, max_tokens: int) -> str:
        import torch

        if self.tokenizer.chat_template:
            ids = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}], add_generation_prompt=True, return_tensors="pt", return_dict=True
            )["input_ids"]
        else:
            ids = self.tokenizer(prompt, return_tensors="pt")["input_ids"]
        ids = ids.to(self.device)
        with torch.inference_mode():
            out = self.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=max_tokens,
                do_sample=False,
                pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
            )
        return self.tokenizer.decode(out[0][ids.shape[1] :], skip_special_tokens=True)


def gguf_to_folder(gguf: Path, out: Path) -> Path:
    """A transformers folder (config, weights de-quantized to float32, tokenizer) of a .gguf model, for servers
    that load folders only (`transformers serve`). Written beside `out` and renamed into place: `out` appears
    whole or not at all. ReaderError for a file transformers cannot read, or an `out` that is taken."""
    import shutil
    import tempfile

    from transformers import AutoModelForCausalLM

    gguf, out = Path(gguf), Path(out)
    if out.exists():
        raise ReaderError(f"{out} exists: give a new folder for the converted model")
    lm = CausalLM(str(gguf))
    config = lm.model.config
    config.architectures = [type(lm.model).__name__]
    plain = AutoModelForCausalLM.from_config(config)  # a GGUF-quantised model cannot be saved as it is
    plain.load_state_dict(lm.model.state_dict())
    out.parent.mkdir(parents=True, exist_ok=True)
    temporary = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        plain.save_pretrained(temporary)
        lm.tokenizer.save_pretrained(temporary)
        temporary.rename(out)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    return out


@contextlib.contextmanager
def quiet_gguf_conversion() -> Iterator[None]:
    """transformers' GGUF loader draws its own tqdm bar ("Converting and de-quantizing GGUF tensors"), which its
    progress-bar switch (quiet_model_loading) does not reach: off too, unless MEDSNIP_VERBOSE."""
    if os.environ.get("MEDSNIP_VERBOSE"):
        yield
        return
    import functools

    from transformers import modeling_gguf_pytorch_utils as gguf_loading

    plain = gguf_loading.tqdm
    gguf_loading.tqdm = functools.partial(plain, disable=True)
    try:
        yield
    finally:
        gguf_loading.tqdm = plain
