"""finchmq.spark: the PySpark data source, format ``rocketmq``.

Imports: ``finchmq.client`` only.
"""
