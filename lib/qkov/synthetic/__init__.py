"""The synthetic next-token task of paper Figs. 2 and 3: its data (``tasks``), the one-layer
attention models and their ensembles (``models``), training many of them as one batched
computation (``train``) and measuring them (``metrics``)."""
