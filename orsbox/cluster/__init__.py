"""Many orsbox servers ("cells") behind one stock router (docs/cluster.md).

`router` writes the HAProxy configuration that places new sessions on the least busy
live cell and sends every request naming a session to the cell in its id
(`orsbox.server.cells`); `engines` runs a private Docker engine per cell; `local`
brings a whole cluster up and down on one machine (`orsbox cluster up/down`).
"""
