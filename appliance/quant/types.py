"""Quantization type names, the mixed-precision policy, and what a GGUF file holds per tensor.

Names and enum values come from the loaded llama-cpp-python binding (`LLAMA_FTYPE_MOSTLY_*`,
`GGML_TYPE_*`), so they always match the libllama that will do the work.

The policy follows the reference deployment's lesson: blanket 4-bit lost code and maths until the
sensitive tensors were kept wider. By default the output head and the token embeddings are Q8_0
(never narrower than the base type), and attention V and FFN down projections get one step more
than the base type. `--keep PATTERN=TYPE` entries come first, so the user's word wins.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from appliance.errors import ApplianceError
from appliance.models.gguf import GGUFFile


class QuantError(ApplianceError):
    """A quantization request that cannot be carried out."""


# The tensor type each file type is built around (llama.cpp's default_type for that ftype).
BASE_TYPE = {
    "F16": "F16", "BF16": "BF16", "Q8_0": "Q8_0", "Q6_K": "Q6_K", "Q5_K_M": "Q5_K", "Q5_K_S": "Q5_K",
    "Q5_1": "Q5_1", "Q5_0": "Q5_0", "Q4_K_M": "Q4_K", "Q4_K_S": "Q4_K", "Q4_1": "Q4_1", "Q4_0": "Q4_0",
    "IQ4_NL": "IQ4_NL", "IQ4_XS": "IQ4_XS", "Q3_K_L": "Q3_K", "Q3_K_M": "Q3_K", "Q3_K_S": "Q3_K",
    "Q2_K": "Q2_K", "Q2_K_S": "Q2_K", "IQ3_S": "IQ3_S", "IQ3_XXS": "IQ3_XXS", "IQ2_XS": "IQ2_XS",
    "IQ2_XXS": "IQ2_XXS",
}
# One step wider, per tensor type (the "one more step" of the policy).
STEP_UP = {
    "Q2_K": "Q3_K", "Q3_K": "Q4_K", "Q4_K": "Q5_K", "Q5_K": "Q6_K", "Q6_K": "Q8_0", "Q4_0": "Q5_0",
    "Q4_1": "Q5_1", "Q5_0": "Q8_0", "Q5_1": "Q8_0", "IQ4_NL": "Q5_K", "IQ4_XS": "Q5_K", "IQ3_S": "Q4_K",
    "IQ3_XXS": "Q4_K", "IQ2_XS": "Q3_K", "IQ2_XXS": "Q3_K",
}
# Approximate bits per weight of each tensor type, to order "narrower" and "wider".
TYPE_BITS = {"F32": 32, "F16": 16, "BF16": 16, "Q8_0": 8.5, "Q6_K": 6.56, "Q5_K": 5.5, "Q5_1": 6,
             "Q5_0": 5.5, "Q4_K": 4.5, "Q4_1": 5, "Q4_0": 4.5, "IQ4_NL": 4.5, "IQ4_XS": 4.25, "Q3_K": 3.44,
             "IQ3_S": 3.44, "IQ3_XXS": 3.06, "Q2_K": 2.63, "IQ2_XS": 2.31, "IQ2_XXS": 2.06}
# Tensors the policy widens, as llama.cpp tensor-name regexes.
SENSITIVE = (r"attn_v\.weight", r"ffn_down\.weight")
# Source file types we quantize from without --allow-requantize.
FULL_PRECISION = {"F32", "F16", "BF16", "Q8_0"}


def ftype_value(name: str) -> int:
    """`Q4_K_M` → llama_ftype. Raises QuantError with the known names otherwise."""
    import llama_cpp

    key = name.upper()
    value = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{key}", None)
    if value is None or key not in BASE_TYPE:
        raise QuantError(f"unknown quantization type {name!r}; one of {', '.join(BASE_TYPE)}")
    return int(value)


def ggml_type_value(name: str) -> int:
    """`Q8_0` → ggml_type."""
    import llama_cpp

    value = getattr(llama_cpp, f"GGML_TYPE_{name.upper()}", None)
    if value is None:
        raise QuantError(f"unknown tensor type {name!r}; one of {', '.join(TYPE_BITS)}")
    return int(value)


@dataclass
class Override:
    """Tensors whose name matches `pattern` (a regex, as llama.cpp's --tensor-type) become `type`."""

    pattern: str
    type: str


def parse_keep(specs: list[str]) -> list[Override]:
    """`--keep PATTERN=TYPE` entries; the pattern must compile and the type must exist."""
    out = []
    for spec in specs:
        pattern, sep, type_name = spec.rpartition("=")
        if not sep or not pattern or not type_name:
            raise QuantError(f"--keep {spec!r}: write PATTERN=TYPE, e.g. ffn_down=Q6_K")
        try:
            re.compile(pattern)
        except re.error as e:
            raise QuantError(f"--keep {spec!r}: bad pattern ({e})") from None
        ggml_type_value(type_name)
        out.append(Override(pattern, type_name.upper()))
    return out


@dataclass
class Policy:
    """What llama_model_quantize is told: head and embedding types, per-tensor overrides."""

    output_type: str | None
    embedding_type: str | None
    overrides: list[Override]


def policy_for(qtype: str, keep: list[Override], mixed: bool = True) -> Policy:
    """The default mixed-precision policy for base type `qtype`, with `keep` first."""
    base = BASE_TYPE[qtype.upper()]
    if not mixed or base not in STEP_UP:  # F16/Q8_0/Q6_K targets: nothing narrower to protect
        return Policy(None, None, list(keep))
    wide = "Q8_0" if TYPE_BITS[base] < TYPE_BITS["Q8_0"] else base
    up = STEP_UP[base]
    return Policy(wide, wide, list(keep) + [Override(p, up) for p in SENSITIVE])


def tensor_types(info: GGUFFile) -> dict[str, str]:
    """Tensor name → type name, as stored in the file."""
    return {t.name: t.type_name for t in info.tensors}


def bits_per_weight(info: GGUFFile) -> float:
    """Average stored bits per weight over every tensor of the file."""
    elements = sum(t.n_elements for t in info.tensors)
    return 8 * sum(t.n_bytes for t in info.tensors) / elements if elements else 0.0



# Tensor types llama.cpp's CPU backend repacks into interleaved layouts with faster kernels
# (ggml-cpu/repack.cpp of the vendored version; which ones apply depends on the CPU's features).
CPU_REPACKED = {"Q4_0", "IQ4_NL", "Q8_0", "Q4_K", "Q5_K", "Q6_K", "Q2_K"}


def repack_share(info: GGUFFile) -> float:
    """Share of the matrix bytes stored in a type the CPU backend can repack."""
    tensors = [t for t in info.tensors if len(t.shape) == 2]
    total = sum(t.n_bytes for t in tensors)
    return sum(t.n_bytes for t in tensors if t.type_name in CPU_REPACKED) / total if total else 0.0
