"""finchmq.namesrv: the name server (broker registry and topic routes).

Imports: ``finchmq.protocol`` and ``finchmq.remoting``.
"""
