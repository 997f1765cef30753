import os

import pandas as pd
from sklearn.tree import DecisionTreeClassifier

d = os.environ["DATA_DIR"]
train = pd.read_csv(os.path.join(d, "train.csv"))
test = pd.read_csv(os.path.join(d, "test.csv"))
feats = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
model = DecisionTreeClassifier(max_depth=3).fit(train[feats], train["species"])
sub = pd.DataFrame({"id": test["id"], "species": model.predict(test[feats])})
sub.to_csv(os.environ["SUBMISSION_PATH"], index=False)
