"""Tests of the DecoratorController package, one module per module of decorators/."""
