"""One module per figure of the book, named by its figure id (``paper-fig2`` ->
``paper_fig2``). Each exports ``Parameters`` - a frozen dataclass of the notebook's
parameters, checked when made, before any work - and the steps its notebook calls, from
training or integrating to the rows it prints and stores. Figure modules do not import each
other; what two of them share lives in a lower layer."""
