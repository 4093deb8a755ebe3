"""The theory: the paper's reduced QK/OV dynamics (``reduced``: the ODE, its closed form, the
four parameterizations' implicit rescaling) and the companion's full-matrix model whose
gradient flow is exactly that ODE (``stylized``)."""
