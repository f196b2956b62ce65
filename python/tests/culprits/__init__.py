"""The six usual culprits of the guides' debugging table, written as a PyTorch user writes them,
each next to its fixed twin. The line each checker finding must point at carries a `# culprit:`
comment, which the tests look up."""
