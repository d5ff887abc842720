"""finchmq.cli: the ``finchmq`` command. Imports everything; nothing imports it."""
