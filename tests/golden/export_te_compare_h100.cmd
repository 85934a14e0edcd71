export te --profile h100x8 --model llama3-70b --tp 4 --seq 8192 --compare ${SRC}/tests/data/te_presets/userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192.json
