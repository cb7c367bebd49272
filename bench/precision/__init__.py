"""CPU GEMM libraries and lower precisions (issues 54, 55): ``gemm`` (the SRU's GEMMs through MKL,
oneDNN, bf16 and int8), ``layer`` (the SRU layer through each route, training and decode, beside
nn.LSTM), ``predict`` (predict.py's throughput in fp32 / int8 / bf16)."""
