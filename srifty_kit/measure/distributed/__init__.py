"""Data-parallel runs over torch.distributed: ``profile`` drives a campaign of world sizes,
``launch`` spawns and watches the processes on this machine, ``worker`` is what each rank runs.
"""
