"""Language tasks (paper section 5): a small GPT-style decoder whose parameters are grouped
by circuit, so that faster query-key learning is one argument (``models``); token batches
(``batches``); its training loop for classification and generative QA, and the names of
the compared conditions (``train``); the interpretability and task metrics - attention
rollout, attention on rationales, ERASER comprehensiveness and sufficiency (one definition
for every figure), heatmaps, SQuAD F1 / exact match (``metrics``); a
synthetic subject-verb agreement task generated from a small grammar (``agreement``);
loaders and tokenizers for the paper's real datasets (``data``, ``tokenizers``) and the
steps the real-data figures share (``pipelines``)."""
