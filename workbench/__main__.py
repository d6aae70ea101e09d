from workbench.cli.main import main

main()
