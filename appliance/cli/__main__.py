"""`python -m appliance.cli`: the same entry point as the `appliance` command."""

from appliance.cli import main

main()
