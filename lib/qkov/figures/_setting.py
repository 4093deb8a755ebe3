"""What the theory chapter's figure notebooks begin with: the reduced model's setting, as
notebook parameters whose defaults are the paper's (``qkov.theory.reduced.Setting``).

Not a figure (its name starts with ``_``): a part that several figures' parameters share.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..checks import integer, number
from ..params import FigureParameters, parameter
from ..theory.reduced import Setting


@dataclass(frozen=True)
class SettingParameters(FigureParameters):
    """The setting with whole numbers of tokens, as the stylized model counts positions."""

    m: int = parameter(Setting.m, integer, "relevant tokens in the context", minimum=1)
    n: int = parameter(Setting.n, integer, "blank tokens in the context", minimum=1)
    b: float = parameter(Setting.b, number, "token embeddings have norm b**-0.5", above=0)
    M: int = parameter(Setting.M, integer, "classes, one next token each", minimum=2)

    @property
    def setting(self) -> Setting:
        return Setting(m=self.m, n=self.n, b=self.b, M=self.M)
