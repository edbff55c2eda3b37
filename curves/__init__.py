"""Real training-loss curves: the bank format and loader.

Importing this package pulls in NumPy only; the generator and families (which need torch) load on demand.
"""

from curves.bank import BankError, BankWriter, CurveBank, CurveRecord, FamilySpec, load_bank

__all__ = ["BankError", "BankWriter", "CurveBank", "CurveRecord", "FamilySpec", "load_bank"]
