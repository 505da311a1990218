"""`python -m retbench.cli ...`: the same command as the `retbench` console script."""

from retbench.cli import main

if __name__ == "__main__":
    main()
