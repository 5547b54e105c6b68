"""More than one process: process (torchrun's environment, the device, DDP's setup),
parallelize (FSDP2 and tensor parallel on a device mesh), sharded_checkpoint (DCP
checkpoints, atomic as a whole) and memory (the bytes each rank holds, from a config).
"""
