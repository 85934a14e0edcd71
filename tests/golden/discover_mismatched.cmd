discover --from-topo topo.txt
