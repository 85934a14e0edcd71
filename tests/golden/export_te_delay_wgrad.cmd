export te --profile h100x8 --delay-wgrad-compute
