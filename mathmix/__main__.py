from mathmix.cli import main

main()
