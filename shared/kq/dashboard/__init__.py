"""The dashboard web page (`kq dashboard`): queues, usage against quota, pending positions, decisions."""
