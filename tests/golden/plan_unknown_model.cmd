plan --model nosuch-model
