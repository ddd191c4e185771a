"""The sections of `hf-attn bench`, a file each, `base.BenchSection` saying what a section declares, and their
registry.

Adding a section is one file here and one line in `BENCH_SECTIONS`. The registry's order is the order of the report
(and of `BenchSettings`' fields and the command's options); a run measures the sections in the order `--sections`
names them, then the parts their own settings ask for (`selectable` False: the tokenizer's JSON, the profile).
"""

from __future__ import annotations

from .base import BenchSection
from .dropout import DropoutSection
from .generation import GenerationSection
from .generation_compiled import GenerationCompiledSection
from .local_attention import LocalAttentionSection
from .long_text import LongTextSection
from .objectives import ObjectivesSection
from .profile import ProfileSection
from .realistic import RealisticSection
from .scaling import ScalingSection
from .serving import ServingSection
from .streaming import StreamingSection
from .throughput import ThroughputSection
from .tokenizer import TokenizerSection

BENCH_SECTIONS: dict[str, type[BenchSection]] = {section.name: section for section in (
    ThroughputSection,
    ScalingSection,
    RealisticSection,
    GenerationSection,
    ObjectivesSection,
    DropoutSection,
    LongTextSection,
    StreamingSection,
    LocalAttentionSection,
    GenerationCompiledSection,
    ServingSection,
    TokenizerSection,
    ProfileSection,
)}


def section_names(by_default: bool = False) -> tuple[str, ...]:
    """The names `--sections` takes, in the registry's order; `by_default`: those it has when it is not given."""
    return tuple(name for name, section in BENCH_SECTIONS.items()
                 if section.selectable and (section.by_default or not by_default))


__all__ = ["BENCH_SECTIONS", "BenchSection", "section_names"]
