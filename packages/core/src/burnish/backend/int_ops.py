"""Ops on int tensors only: bitwise logic."""

from __future__ import annotations

from abc import ABC, abstractmethod

from burnish.backend.base import Primitive


class IntOps(ABC):
    """Bitwise operations on ints (two's complement), broadcast where binary."""

    @abstractmethod
    def bitwise_and(self, lhs: Primitive, rhs: Primitive) -> Primitive:
        """``lhs & rhs``."""

    @abstractmethod
    def bitwise_or(self, lhs: Primitive, rhs: Primitive) -> Primitive:
        """``lhs | rhs``."""

    @abstractmethod
    def bitwise_xor(self, lhs: Primitive, rhs: Primitive) -> Primitive:
        """``lhs ^ rhs``."""

    @abstractmethod
    def bitwise_not(self, x: Primitive) -> Primitive:
        """``~x``."""
