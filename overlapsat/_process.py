"""What kind of process this is, for the solver's imports (decision 115).

A process whose time limit counts from its own start (the command line, a store's worker) sets
`defer_or_tools` before it imports the solver: OR-Tools then loads with the first CP-SAT phase, and a search that
runs none does not pay its import. A library user's process leaves it False: OR-Tools loads with the solver
package, outside any call's clock."""

defer_or_tools = False
