"""finchmq.compat: drop-in façades of other RocketMQ client APIs over ``finchmq.client``.

Imports: ``finchmq.client`` only (an import-linter contract checks it).
"""
