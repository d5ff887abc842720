"""The broker's request processors, one class per family of request codes (Java's
``broker/processor``). Each holds a reference to the ``BrokerController`` it serves."""
