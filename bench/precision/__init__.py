"""CPU GEMM libraries and lower precisions (issues 54, 55, 67, 69): ``gemm`` (the SRU's GEMMs through MKL,
oneDNN, bf16 and int8), ``layer`` (the SRU layer through each route, training and decode, beside
nn.LSTM), ``predict`` (predict.py's throughput in fp32 / int8 / bf16), ``training`` (the bf16 training step
beside its own bf16 GEMMs, fp32 and nn.LSTM), ``ab`` (two checkouts against each other in one paired run)."""
