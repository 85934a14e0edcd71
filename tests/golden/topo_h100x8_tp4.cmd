topo --profile h100x8 --tp 4
