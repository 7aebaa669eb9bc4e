"""`python -m midtrain train RECIPE`: the mathmix CLI, for `torchrun --nproc_per_node N -m midtrain train ...`."""

from mathmix.cli import main

if __name__ == "__main__":
    main()
