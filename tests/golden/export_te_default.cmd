export te
