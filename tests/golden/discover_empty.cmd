discover --from-topo empty.txt
