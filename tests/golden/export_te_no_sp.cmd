export te --no-sp
