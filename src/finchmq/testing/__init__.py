"""finchmq.testing: a pytest plugin with an embedded name server and broker.

Imports: anything; nothing in ``finchmq`` imports it.
"""
