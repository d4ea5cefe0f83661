"""A reader that is a causal language model run in this process by transformers, from a local folder or a
GGUF file (`model.gguf`: its config and tokenizer come from the file; transformers dequantizes it).
Greedy decoding, through the tokenizer's chat template where it has one: the same prompt gives the same
answer on the same machine."""

from __future__ import annotations

from pathlib import Path

from medsnip.buildrecord import sha256_file
from medsnip.encoders import weights_sha256
from medsnip.encoders.transformer import quiet_model_loading
from refkit.readers.errors import ReaderError


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
