"""finchmq.client: the Python client (producer, consumers, admin).

Imports: ``finchmq.protocol`` and ``finchmq.remoting``.
"""
