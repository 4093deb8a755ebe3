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

    m: int = parameter(Setting.m, integer, minimum=1,
                       doc="relevant tokens in the context; a whole number, at least 1")
    n: int = parameter(Setting.n, integer, minimum=1,
                       doc="blank tokens in the context; a whole number, at least 1")
    b: float = parameter(Setting.b, number, above=0,
                         doc="the ODE's constant: token embeddings have norm b**-0.5; positive")
    M: int = parameter(Setting.M, integer, minimum=2,
                       doc="classes, one next token each; at least 2; the loss starts at log M")

    @property
    def setting(self) -> Setting:
        return Setting(m=self.m, n=self.n, b=self.b, M=self.M)
