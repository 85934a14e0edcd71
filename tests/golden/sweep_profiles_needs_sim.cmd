sweep --summary --profiles a6000x4,a6000x8
