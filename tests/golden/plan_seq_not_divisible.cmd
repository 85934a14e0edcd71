plan --seq 4097
