sweep --threads -1
